"""The metadata database: typed tables, engine/session setup, migrations.

Repositories for each domain live beside the domain's service and take a
``Session``; services never commit, the request or task boundary does.
"""

from modelport.store.database import Database, create_database
from modelport.store.migrate import upgrade

__all__ = ["Database", "create_database", "upgrade"]
