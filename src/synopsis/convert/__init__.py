"""Conversions between our OpenAI-shape messages and other providers' and frameworks' shapes.

Each converter lives in its own module and is pure; a round trip loses no content, tool calls
or ``meta`` / ``usage`` markers. Anthropic Messages (:mod:`~synopsis.convert.anthropic`),
LangChain messages (:mod:`~synopsis.convert.langchain`), Pydantic AI messages
(:mod:`~synopsis.convert.pydantic_ai`) and OpenAI Responses API items as the Agents SDK keeps
them (:mod:`~synopsis.convert.openai_responses`). :func:`to_openai_messages` reads any of the
framework shapes; :func:`foreign_message_hint` says which converter an unknown object needs.
The framework packages are optional and imported only when their converter is called.
"""

from synopsis.convert._detect import foreign_message_hint, to_openai_messages
from synopsis.convert.anthropic import from_anthropic, to_anthropic
from synopsis.convert.langchain import from_langchain, to_langchain
from synopsis.convert.openai_responses import from_responses_items, to_responses_items
from synopsis.convert.pydantic_ai import from_pydantic_ai, to_pydantic_ai
from synopsis.messages import CARRY_KEY

__all__ = [
    "CARRY_KEY",
    "foreign_message_hint",
    "from_anthropic",
    "from_langchain",
    "from_pydantic_ai",
    "from_responses_items",
    "to_anthropic",
    "to_langchain",
    "to_openai_messages",
    "to_pydantic_ai",
    "to_responses_items",
]
