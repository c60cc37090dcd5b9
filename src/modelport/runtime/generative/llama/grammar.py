"""Grammars (llama.cpp's GBNF) that constrain an answer to JSON, or to a JSON schema.

The schema is turned into a grammar by ``llama-cpp-python``'s converter (the port of
llama.cpp's own), never fetching a remote ``$ref``. ``json_object`` allows any object
with no whitespace between tokens, so a small model cannot spend its tokens on
indentation.
"""

from __future__ import annotations

import functools
import json

from modelport.errors import InvalidInput
from modelport.runtime.generative.sampling import ResponseFormat

JSON_OBJECT_GBNF = r"""
root   ::= object
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ( string ":" value ( "," string ":" value )* )? "}"
array  ::= "[" ( value ( "," value )* )? "]"
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,4} )?
"""


def grammar_for(response_format: ResponseFormat) -> str:
    """The GBNF of a response format (400 ``invalid_parameter`` for a schema the
    converter cannot express)."""
    if response_format.type == "json_object" or response_format.schema is None:
        return JSON_OBJECT_GBNF
    return _schema_grammar(json.dumps(response_format.schema, sort_keys=True))


@functools.lru_cache(maxsize=256)
def _schema_grammar(schema: str) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        return str(json_schema_to_gbnf(schema))
    except Exception as exc:  # the converter raises bare exceptions on what it lacks
        raise InvalidInput(
            f"the response_format's JSON schema cannot be enforced: {exc}",
            code="invalid_parameter",
            param="response_format",
        ) from None
