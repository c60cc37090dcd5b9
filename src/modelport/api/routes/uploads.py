"""/api/uploads (placeholder until implemented)."""

from fastapi import APIRouter

router = APIRouter(tags=["uploads"])
