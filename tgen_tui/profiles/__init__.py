"""Stream profiles: pydantic models, the YAML loader with positions, and JSON schema output."""
