"""Prompt templates as assets: versioned chat prompts with variables, in a tenant's
namespace, with the models' visibility, grants and immutability (``service``); rendered
by plain substitution, never evaluated (``render``)."""
