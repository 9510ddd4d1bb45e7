"""Structural family: FST acceptance, orthographic and morphological accuracy
(SPEC §2.2), with finite-state analyzers declared by the language cards."""
