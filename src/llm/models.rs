//! Model registry: built-in models, `models.json` custom providers and overrides, API keys.
