"""/api/blobs (placeholder until implemented)."""

from fastapi import APIRouter

router = APIRouter(tags=["blobs"])
