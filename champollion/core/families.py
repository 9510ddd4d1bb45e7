"""The families in one table: name, the import path of its scorer factory,
port in a cluster, the pip extras of its image, what its pods ask of a
cluster and whether it needs a GPU. Everything that lists the families
reads it: the registry (services/registry.py), the CLI's family names, and
the deployment files, which deploy/generate.py writes from it (the
Dockerfile's family selection, the gateway configs, the Kubernetes family
manifests). The ports are the deployment's: `champollion serve` numbers
its own from `--port`, `up` takes free ones. The gateway's port is
written by hand in deploy/k8s/base/gateway.yaml and the Dockerfile.

Data only, in the core because both sides read it (the gateway may not
import `services`); which metrics a family computes is the metric table's
fact (gateway/card/metrics.py), not this one's."""
from __future__ import annotations

from dataclasses import dataclass

# The gateway's port, the CLI's default `--gateway` port; a family's port in a cluster is its row's.
GATEWAY_PORT = 50051


@dataclass(frozen=True)
class Resources:
    """A pod's requests and limits (Kubernetes quantities) and how many run."""
    cpu: str
    memory: str
    cpu_limit: str
    memory_limit: str
    min_replicas: int = 2
    max_replicas: int = 10


@dataclass(frozen=True)
class Family:
    name: str
    port: int
    # What the family scores, in one line (the manifest's heading comment).
    summary: str
    # The `pip install .[...]` extras of its image, besides `icu` (every image).
    extras: tuple[str, ...] = ()
    resources: Resources = Resources("500m", "512Mi", "2", "1Gi")
    # Scheduled on the GPU node pool, one GPU a pod (deploy/k8s/overlays/gpu).
    gpu: bool = False
    # Reads the target language's HFST analyzer from /analyzers, which the
    # analyzers image fills (deploy/k8s/components/analyzers).
    analyzers: bool = False
    # Compiled modules its image must carry (the Dockerfile checks each imports).
    native: tuple[str, ...] = ()
    # "module:function" of its scorer factory; by default the family's package's.
    factory: str = ""

    def __post_init__(self):
        if not self.factory:
            object.__setattr__(self, "factory", f"services.{self.name}.factory:create_scorer")


TABLE: tuple[Family, ...] = (
    Family("surface", 50061, "exact/equivalent match, chrF++, BLEU, TER, length ratio (sacreBLEU)",
           extras=("ko", "ja"), native=("champollion.core.native._stats",)),
    Family("structural", 50062, "FST acceptance, morphology, orthography (HFST analyzers)",
           extras=("fst",), resources=Resources("500m", "768Mi", "2", "2Gi"), analyzers=True),
    Family("semantic", 50063, "COMET and sentence embeddings, on CUDA",
           extras=("comet",), resources=Resources("2", "8Gi", "4", "16Gi", min_replicas=1, max_replicas=4),
           gpu=True, native=("champollion.core.native._matmul", "champollion.core.native._rows")),
    Family("behavioral", 50064, "code-switching, hallucination, terminology, consistency, numbers",
           extras=("behavioral", "fst"), resources=Resources("500m", "768Mi", "2", "2Gi"), analyzers=True,
           native=("champollion.core.native._matmul", "champollion.core.native._rows")),
    Family("compliance", 50065, "placeholders, quotes, casing, repair effectiveness",
           resources=Resources("250m", "256Mi", "1", "512Mi", max_replicas=6)),
)
FAMILIES: dict[str, Family] = {family.name: family for family in TABLE}
FAMILY_NAMES: tuple[str, ...] = tuple(FAMILIES)
