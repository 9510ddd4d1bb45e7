"""File helpers shared by the services."""
import hashlib
from pathlib import Path


def sha256_of_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks (analyzers and model
    checkpoints are large); run cards name what scored them by this."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
