import pytest

pytest.importorskip("starlette", reason="the review UI needs memvault[server]")
pytest.importorskip("jinja2", reason="the review UI needs memvault[server]")

from uisupport import review  # noqa: E402,F401


def test_placeholder(review):
    assert review.client().get("/tree").status == 200
