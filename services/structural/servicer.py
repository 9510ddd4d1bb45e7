"""gRPC glue for the structural family's own service, Analyze, served beside
the shared Family contract."""
from __future__ import annotations

import asyncio

import grpc

from champollion.core.analyzers import AnalyzerMissing
from champollion.core.cards import UnknownLanguage
from champollion.eval.v1 import structural_pb2, structural_pb2_grpc
from services.servicer import FamilyServicer


class AnalyzeServicer(structural_pb2_grpc.StructuralServicer):
    def __init__(self, family: FamilyServicer):
        self.family = family

    def _analyze(self, request) -> structural_pb2.AnalyzeResponse:
        card = self.family.cards.get(request.language)
        analyzer = self.family.scorer.registry.for_card(card)
        response = structural_pb2.AnalyzeResponse(analyzer=analyzer.name, analyzer_sha256=analyzer.sha256)
        for word in request.words:
            result = response.words.add(word=word)
            for parsed in analyzer.parsed(word, request.max_analyses or -1):
                result.analyses.add(raw=parsed.raw, lemma=parsed.lemma, tags=list(parsed.tags))
        return response

    async def Analyze(self, request, context):
        served = self.family.scorer.languages()
        try:
            if served and self.family.cards.get(request.language).code not in served:
                await context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                    f"this structural service does not serve {request.language}")
            return await asyncio.to_thread(self._analyze, request)
        except UnknownLanguage:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"language: unknown code {request.language!r}")
        except AnalyzerMissing as error:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(error))


def register_extra(server: grpc.aio.Server, family: FamilyServicer) -> list[str]:
    """Adds the Analyze service beside the family contract; returns its name."""
    structural_pb2_grpc.add_StructuralServicer_to_server(AnalyzeServicer(family), server)
    return [structural_pb2.DESCRIPTOR.services_by_name["Structural"].full_name]
