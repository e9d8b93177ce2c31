"""Connectors: where datasets come from. ``CONNECTORS`` maps each name to its :class:`Connector` class (a plugin:
options, construction, offsets, planning and executor-side reads; connectors/base.py); the Spark source finds the
connector here and calls nothing else of it."""

from adaptstream.connectors.base import Connector, ConnectorOptions, ReadTask
from adaptstream.registry import Registry

CONNECTORS: Registry[type[Connector]] = Registry("connector")


def register_connector(cls: type[Connector]) -> type[Connector]:
    """Add a connector class (its ``name``) to ``CONNECTORS``; the way a plugin package adds its own."""
    return CONNECTORS.register(cls.name)(cls)


def _register_builtin() -> None:
    from adaptstream.connectors.files import FilesConnector
    from adaptstream.connectors.generator import GeneratorConnector
    from adaptstream.connectors.redis import RedisConnector

    for cls in (FilesConnector, GeneratorConnector, RedisConnector):
        register_connector(cls)


_register_builtin()

__all__ = ["CONNECTORS", "Connector", "ConnectorOptions", "ReadTask", "register_connector"]
