"""Behavioral metrics of one batch, as [numerator, denominator] statistics
(consistency: rendering counts per glossary term, see CONSISTENCY_LAYOUT)."""
from __future__ import annotations

from champollion import __version__
from champollion.core.analyzers import AnalyzerRegistry
from champollion.core.cards import LanguageCard
from champollion.core.words import words_of
from services.behavioral.code_switching import CodeSwitchDetector
from services.behavioral.detachment import RULE as DETACHED_RULE
from services.behavioral.detachment import Detachment, detachments
from services.behavioral.hallucination import MAX_PERIOD, findings
from services.behavioral.lexicons import (
    LexiconMissing,
    lemma_table,
    lexicon,
    number_word_test,
    switch_tables,
)
from services.behavioral.numbers import number_differences
from services.behavioral.terminology import applies, lemmatised, rendering_used
from services.contract import (
    BatchContext,
    BatchOutput,
    ComponentInfo,
    EntryInput,
    EntryOutput,
    Term,
)
from champollion.core.encoder.embeddings import EMBEDDING_MODEL, EmbeddingUnavailable, SentenceEmbedder, shared_embedder

# Run-level label: renderings per glossary term, in glossary order, so the
# gateway can read the summed consistency counts term by term.
CONSISTENCY_LAYOUT = "consistency_groups"
# What the target analyzer does here, for the warnings about it.
ANALYZER_USES = ("terminology_adherence (inflected renderings) and code_switching_rate (words the target "
                 "analyzer accepts) are scored")


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def _optional_lexicon(card: LanguageCard) -> frozenset[str] | None:
    try:
        return lexicon(card)
    except LexiconMissing:
        return None


def _code_switch_detector(source: LanguageCard, target: LanguageCard, analyzer, warnings: list[str]) -> CodeSwitchDetector:
    """Source words are switches unless the target's word list or analyzer
    claims them; without either, every shared word counts: warned about."""
    source_words = _optional_lexicon(source)
    if source_words is None:
        warnings.append(f"no {source.code} word list (card lexicon.spacy, spaCy data): code-switching found by "
                        "script only")
        # No word is then looked up in the target's tables.
        target_words, target_probabilities, source_probabilities = None, {}, {}
    else:
        target_words, target_probabilities, source_probabilities = switch_tables(source, target)
    target_uses_latin = any(script.startswith("Latn") for script in target.scripts)
    # In another script, a source word is found by its letters, whatever the word lists.
    if (source_words is not None and target_words is None and analyzer is None and target_uses_latin
            and target.code != source.code):
        warnings.append(f"code_switching_rate is unreliable for {target.code}: neither a word list (card "
                        f"lexicon.spacy) nor an analyzer tells its words from {source.code} words, so words both "
                        "languages share count as switches")
    return CodeSwitchDetector(
        source_words=source_words,
        target_words=target_words,
        loanwords=frozenset(word.lower() for word in target.loanwords),
        target_uses_latin=target_uses_latin,
        accepts=analyzer.accepts if analyzer else None,
        target_probabilities=target_probabilities,
        source_probabilities=source_probabilities,
    )


def _uncovered(context: BatchContext) -> list[str]:
    """The run's languages the sentence encoder does not cover (card metricModelSupport.embedding)."""
    return list(dict.fromkeys(card.code for card in (context.source, context.target)
                              if not card.model_support.embedding))


class BehavioralScorer:
    name = "behavioral"
    version = __version__
    metrics = (
        "code_switching_rate", "hallucination_rate", "terminology_adherence",
        "consistency_score", "number_mismatch_rate",
    )

    def __init__(self, registry: AnalyzerRegistry | None = None, embedder: SentenceEmbedder | None = None):
        self.registry = registry or AnalyzerRegistry()
        # The semantic family's encoder, for detached outputs (hallucination_rate).
        self.embedder = embedder or shared_embedder()

    def languages(self) -> list[str]:
        return []

    def components(self) -> list[ComponentInfo]:
        return [ComponentInfo(kind="data", name="spacy-lookups-data", version="lemma lookups + spaCy stop words"),
                ComponentInfo(kind="model", name=EMBEDDING_MODEL, version=self.embedder.version,
                              detail=f"detached outputs: {DETACHED_RULE}")]

    def score(self, entries: list[EntryInput], context: BatchContext) -> BatchOutput:
        source, target = context.source, context.target
        warnings: list[str] = []
        wants_switching, wants_hallucination, wants_terminology, wants_consistency, wants_numbers = (
            context.wants(metric_id) for metric_id in self.metrics)
        glossary = context.glossary
        wants_terms = wants_terminology or (wants_consistency and bool(glossary))
        analyzer = None
        if wants_switching or wants_terms:
            # Warned about here too: this family may run where structural's analyzers are not.
            analyzer = self.registry.for_scoring(target, warnings, if_missing=f"{ANALYZER_USES} without it",
                                                 if_caveat=f"{ANALYZER_USES} with it")
        detector = _code_switch_detector(source, target, analyzer, warnings) if wants_switching else None
        keep_hyphenated = target.words.keep_hyphenated
        lemmas_of = analyzer.lemmas if analyzer else (lambda _word: set())
        source_lemmas = {}
        if wants_terms:
            try:
                source_lemmas = lemma_table(source)
            except LexiconMissing:
                pass
        detached = self._detachments(entries, context, warnings) if wants_hallucination else [None] * len(entries)
        is_number_word = number_word_test(source) if wants_hallucination else None
        outputs = []
        for entry, detachment in zip(entries, detached):
            words = words_of(entry.prediction, keep_hyphenated) if detector is not None or wants_terms else []
            values: dict = {}
            stats: dict = {}
            if detector is not None:
                switched = detector.switched(words, entry.source)
                values["code_switching_rate"] = _ratio(len(switched), len(words))
                values["code_switched_words"] = switched
                stats["code_switching_rate"] = [float(len(switched)), float(len(words))]

            if wants_hallucination:
                found = findings(entry.prediction, entry.source, entry.reference, detachment, is_number_word)
                values["hallucination_rate"] = _ratio(found.flagged, found.tokens)
                values["hallucination_reasons"] = found.reasons
                values["hallucination_spans"] = found.spans
                stats["hallucination_rate"] = [float(found.flagged), float(found.tokens)]

            if wants_terms:
                self._terminology(entry, glossary, words, lemmas_of, lemmatised(entry.source, source_lemmas),
                                  values, stats, context)

            if wants_numbers:
                differences = number_differences(entry.source, entry.prediction)
                mismatch = bool(differences["unmatched"] or differences["missing"])
                values["number_mismatch"] = mismatch
                values["number_mismatches"] = differences
                stats["number_mismatch_rate"] = [float(mismatch), 1.0]
            outputs.append(EntryOutput(id=entry.id, values=values, stats=stats))
        labels = ({CONSISTENCY_LAYOUT: ",".join(str(len(t.renderings)) for t in glossary)}
                  if glossary and wants_consistency else {})
        signatures = {}
        if detector is not None:
            signatures["code_switching_rate"] = (
                f"lexicons:spacy|loanwords:card|analyzer:{analyzer.name if analyzer else 'none'}"
                f"{f'|translit:{analyzer.reads}' if analyzer and analyzer.reads else ''}|version:{__version__}")
        if wants_hallucination:
            signatures["hallucination_rate"] = (
                f"oscillation:period<={MAX_PERIOD}|numbers:not-in-src-or-ref|detached:"
                f"{f'{DETACHED_RULE}|model:{EMBEDDING_MODEL}' if not _uncovered(context) else 'off'}"
                f"|version:{__version__}")
        return BatchOutput(entries=outputs, warnings=warnings, labels=labels, signatures=signatures)

    def _detachments(self, entries: list[EntryInput], context: BatchContext,
                     warnings: list[str]) -> list[Detachment | None]:
        """Each entry's similarities to its source (None for an entry not
        scored: failed, or empty); all None, with a warning, where the encoder
        does not cover both languages."""
        uncovered = _uncovered(context)
        if uncovered:
            warnings.append(f"the sentence-embedding model ({EMBEDDING_MODEL}) does not cover "
                            f"{' and '.join(uncovered)} (language card metricModelSupport.embedding): "
                            "hallucination_rate finds oscillations and unsupported numbers, not detached outputs")
            return [None] * len(entries)
        scored = [entry for entry in entries if not entry.failed and entry.prediction.strip()]
        try:
            found = detachments(self.embedder, [e.source for e in scored], [e.prediction for e in scored],
                                [e.reference for e in scored])
        except EmbeddingUnavailable as error:
            warnings.append(f"{error}: hallucination_rate finds oscillations and unsupported numbers, "
                            "not detached outputs")
            return [None] * len(entries)
        by_id = dict(zip((entry.id for entry in scored), found))
        return [by_id.get(entry.id) for entry in entries]

    @staticmethod
    def _terminology(entry: EntryInput, glossary: tuple[Term, ...], words, lemmas_of, source_lemmatised: str,
                     values, stats, context: BatchContext) -> None:
        """terminology_adherence and, from the same renderings found,
        consistency_score's counts: each when asked for."""
        terms = [term for term in (*glossary, *entry.terms) if applies(term, entry.source, source_lemmatised)]
        output_lemmas = [lemmas_of(word) for word in words] if terms else []
        used = {term: rendering_used(term, entry.prediction, output_lemmas, lemmas_of) for term in terms}
        if context.wants("terminology_adherence"):
            adhered = sum(1 for index in used.values() if index is not None)
            values["terminology_adherence"] = _ratio(adhered, len(terms))
            values["terms_missed"] = [term.source for term, index in used.items() if index is None]
            stats["terminology_adherence"] = [float(adhered), float(len(terms))]
        if glossary and context.wants("consistency_score"):
            # One count per rendering of every glossary term, in glossary order.
            counts = []
            for term in glossary:
                chosen = used.get(term)
                counts += [1.0 if chosen == index else 0.0 for index in range(len(term.renderings))]
            stats["consistency_score"] = counts
