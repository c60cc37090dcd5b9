"""/api/models (placeholder until implemented)."""

from fastapi import APIRouter

router = APIRouter(tags=["models"])
