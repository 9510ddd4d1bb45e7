"""Families implemented in this build, by name, for `champollion serve` and
the embedded stack. A family absent here is reported as not configured."""
from __future__ import annotations

from typing import Callable

from services.compliance.servicer import create_servicer as create_compliance
from services.servicer import FamilyServicer
from services.surface.servicer import create_servicer as create_surface

ALL_FAMILIES = ("surface", "structural", "semantic", "behavioral", "compliance")

IMPLEMENTED: dict[str, Callable[..., FamilyServicer]] = {
    "surface": create_surface,
    "compliance": create_compliance,
}
