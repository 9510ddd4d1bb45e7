"""Eval standards (LYSS): language-specific metric plugins, one package per
language (`eval_standards/<code>/`), discovered from a language card's
`evalMetrics` and run by the structural service for that language."""
