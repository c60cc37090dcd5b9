"""What the HTTP API says about itself: ``/api/openapi.json`` corrected to the server's real
answers (``document``), the error document (``problem``), the names of the operations
(``operations``), the Open Inference Protocol's document (``v2``) and the docs pages
served from the package (``ui``)."""

from modelport.api.openapi.document import describe_api
from modelport.api.openapi.problem import Problem, problems

__all__ = ["Problem", "describe_api", "problems"]
