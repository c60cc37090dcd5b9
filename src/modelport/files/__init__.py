"""Files a tenant uploads for later work: the input of a batch (OpenAI's Files API,
``/v1/files``), job inputs. A file is a blob of the tenant's (content addressed,
deduplicated) with a name, a purpose and an id; a ``batch`` file's lines are checked
when it is uploaded (``batch_lines``)."""

from modelport.files.service import FileService
from modelport.files.types import FileObject, FilePurpose

__all__ = ["FileObject", "FilePurpose", "FileService"]
