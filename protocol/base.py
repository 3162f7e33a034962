"""Shared model configuration."""

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Unknown keys are errors: a typo in a bundle must never be silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=False, validate_assignment=True)
