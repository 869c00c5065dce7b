"""What a workflow does with input fields its model does not declare (pure)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

ExtraInput = Literal["forbid", "ignore"]


def input_type_for(input_type: Any, extra: ExtraInput) -> Any:
    """The type a workflow's input is validated as. A pydantic model that does not choose its
    own `extra` policy refuses unknown fields (an agent's typo must not run silently with the
    defaults) unless the workflow opted into ignoring them; a subclass with the same name keeps
    the published schema's title and the user's `isinstance` checks."""
    if (
        extra == "ignore"
        or not (isinstance(input_type, type) and issubclass(input_type, BaseModel))
        or input_type.model_config.get("extra") is not None
    ):
        return input_type
    return type(
        input_type.__name__,
        (input_type,),
        {
            "model_config": {**input_type.model_config, "extra": "forbid"},
            "__module__": input_type.__module__,
            "__qualname__": input_type.__qualname__,
            "__doc__": input_type.__doc__,
        },
    )
