"""What `PostgresStore` needs of its driver before it connects: that it is installed, and a
connection string's server named without its password."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["describe", "require_driver"]


def describe(params: Mapping[str, object]) -> str:
    """The server and database of a connection string, without its password."""
    user = f"{params['user']}@" if params.get("user") else ""
    host = str(params.get("host") or "")
    port = f":{params['port']}" if params.get("port") else ""
    database = f"/{params['dbname']}" if params.get("dbname") else ""
    return f"postgresql://{user}{host}{port}{database}"


def require_driver() -> None:
    try:
        import psycopg  # noqa: F401  # only checking that the extra is installed
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "PostgresStore needs psycopg 3 and psycopg_pool: "
            "pip install 'agentmesh-failwell[postgres]'"
        ) from exc
