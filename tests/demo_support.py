"""An independent reference for the demo's metrics, shared by the fast and the Ray-backed demo tests."""

from __future__ import annotations

from trajschema.cli.rollout import MAX_RESPONSE_LEN


def expected_metrics(samples: list[dict]) -> dict[str, float]:
    """The demo's metrics over ``samples``, computed here with plain Python from the sample dicts."""
    response = [int(s["response_mask"].sum()) for s in samples]
    return {
        "score/mean": sum(float(s["rm_scores"].sum()) for s in samples) / len(samples),
        "response_length/mean": sum(response) / len(samples),
        "response_length/clip_ratio": sum(r >= MAX_RESPONSE_LEN for r in response) / len(samples),
        "prompt_length/mean": sum(len(s["prompts"]) for s in samples) / len(samples),
    }
