"""Behavioral metrics of one batch, as [numerator, denominator] statistics
(consistency: rendering counts per glossary term, see CONSISTENCY_LAYOUT)."""
from __future__ import annotations

from champollion import __version__
from champollion.analyzers import AnalyzerRegistry
from champollion.cards import LanguageCard
from champollion.words import words_of
from services.behavioral.code_switching import CodeSwitchDetector
from services.behavioral.hallucination import hallucinated
from services.behavioral.lexicons import LexiconMissing, lemma_table, lexicon
from services.behavioral.numbers import numbers_in
from services.behavioral.terminology import applies, lemmatised, rendering_used
from services.contract import (
    BatchContext,
    BatchOutput,
    ComponentInfo,
    EntryInput,
    EntryOutput,
    Term,
)

# Run-level label: renderings per glossary term, in glossary order, so the
# gateway can read the summed consistency counts term by term.
CONSISTENCY_LAYOUT = "consistency_groups"
# What the target analyzer does here, for the warnings about it.
ANALYZER_USES = ("terminology_adherence (inflected renderings) and code_switching_rate (words the target "
                 "analyzer accepts) are scored")


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def _optional_lexicon(card: LanguageCard, role: str, warnings: list[str]) -> frozenset[str] | None:
    try:
        return lexicon(card)
    except LexiconMissing as error:
        warnings.append(f"{role} lexicon unavailable ({error}): code-switching found by script only")
        return None


class BehavioralScorer:
    name = "behavioral"
    version = __version__
    metrics = (
        "code_switching_rate", "hallucination_rate", "terminology_adherence",
        "consistency_score", "number_mismatch_rate",
    )

    def __init__(self, registry: AnalyzerRegistry | None = None):
        self.registry = registry or AnalyzerRegistry()

    def languages(self) -> list[str]:
        return []

    def components(self) -> list[ComponentInfo]:
        return [ComponentInfo(kind="data", name="spacy-lookups-data", version="lemma lookups + spaCy stop words")]

    def score(self, entries: list[EntryInput], context: BatchContext) -> BatchOutput:
        source, target = context.source, context.target
        warnings: list[str] = []
        # Warned about here too: this family may run where structural's analyzers are not.
        analyzer = self.registry.for_scoring(target, warnings, if_missing=f"{ANALYZER_USES} without it",
                                             if_caveat=f"{ANALYZER_USES} with it")
        detector = CodeSwitchDetector(
            source_words=_optional_lexicon(source, "source", warnings),
            target_words=_optional_lexicon(target, "target", warnings) if target.code != source.code else None,
            loanwords=frozenset(word.lower() for word in target.loanwords),
            target_uses_latin=any(script.startswith("Latn") for script in target.scripts),
            accepts=analyzer.accepts if analyzer else None,
        )
        keep_hyphenated = target.words.keep_hyphenated
        lemmas_of = analyzer.lemmas if analyzer else (lambda _word: set())
        try:
            source_lemmas = lemma_table(source)
        except LexiconMissing:
            source_lemmas = {}
        glossary = context.glossary
        outputs = []
        for entry in entries:
            words = words_of(entry.prediction, keep_hyphenated)
            values: dict = {}
            stats: dict = {}
            switched = detector.switched(words, entry.source)
            values["code_switching_rate"] = _ratio(len(switched), len(words))
            values["code_switched_words"] = switched
            stats["code_switching_rate"] = [float(len(switched)), float(len(words))]

            flagged, tokens, reasons = hallucinated(entry.prediction, entry.source, entry.reference)
            values["hallucination_rate"] = _ratio(flagged, tokens)
            values["hallucination_reasons"] = reasons
            stats["hallucination_rate"] = [float(flagged), float(tokens)]

            self._terminology(entry, glossary, words, lemmas_of, lemmatised(entry.source, source_lemmas), values, stats)

            mismatch = numbers_in(entry.source) != numbers_in(entry.prediction)
            values["number_mismatch"] = mismatch
            stats["number_mismatch_rate"] = [float(mismatch), 1.0]
            outputs.append(EntryOutput(id=entry.id, values=values, stats=stats))
        labels = {CONSISTENCY_LAYOUT: ",".join(str(len(t.renderings)) for t in glossary)} if glossary else {}
        return BatchOutput(
            entries=outputs, warnings=warnings, labels=labels,
            signatures={"code_switching_rate": f"lexicons:spacy|loanwords:card|analyzer:{analyzer.name if analyzer else 'none'}"
                        f"|version:{__version__}"},
        )

    @staticmethod
    def _terminology(entry: EntryInput, glossary: tuple[Term, ...], words, lemmas_of, source_lemmatised: str,
                     values, stats) -> None:
        terms = [term for term in (*glossary, *entry.terms) if applies(term, entry.source, source_lemmatised)]
        output_lemmas = [lemmas_of(word) for word in words] if terms else []
        used = {term: rendering_used(term, entry.prediction, output_lemmas, lemmas_of) for term in terms}
        adhered = sum(1 for index in used.values() if index is not None)
        values["terminology_adherence"] = _ratio(adhered, len(terms))
        values["terms_missed"] = [term.source for term, index in used.items() if index is None]
        stats["terminology_adherence"] = [float(adhered), float(len(terms))]
        if glossary:
            # One count per rendering of every glossary term, in glossary order.
            counts = []
            for term in glossary:
                chosen = used.get(term)
                counts += [1.0 if chosen == index else 0.0 for index in range(len(term.renderings))]
            stats["consistency_score"] = counts
