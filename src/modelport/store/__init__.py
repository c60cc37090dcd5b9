"""The metadata database: typed tables, engine/session setup, migrations.

``Database.transaction()`` is the one transaction boundary: a service method opens it
and hands the ``Session`` to its domain's repository functions, which live beside the
service (``registry/repository.py``, ...) and never commit themselves. A query more
than one service needs (``blob_lenders``) lives here, below them, so that no service
reads another's repository.
"""

from modelport.store.database import Database, create_database
from modelport.store.migrate import upgrade

__all__ = ["Database", "create_database", "upgrade"]
