"""/api/versions (placeholder until implemented)."""

from fastapi import APIRouter

router = APIRouter(tags=["versions"])
