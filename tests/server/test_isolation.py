"""Named labellers are kept apart: nothing bob can send (answers, undos, status reads) tells him
what alice answered, and a pair handed to one of them cannot be answered by the other.

The first test is a non-interference check: the same script of bob's requests is run against
worlds that differ only in alice's answers, and bob must see the very same replies in each. The
script is the attack of issue 32 (answer one of alice's overlap pairs, read ``/api/status``, undo
if the agreement did not rise, try the next answer), which recovered 9 of 9 of her answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from rlhf.core.labellers import shows_twice
from rlhf.server import create_app
from rlhf.store import VIDEO_READY, LabelStore

ALICE, BOB = "tok-alice-0123", "tok-bob-456789"
TOKENS = {ALICE: "alice", BOB: "bob"}
OVERLAP = 0.5
PROBES = ("left", "right", "equal", "skip")


def _served(tmp_path: Path, add_pairs, mp4_bytes: bytes, n: int = 24):
    store = LabelStore(tmp_path / "labels.sqlite")
    videos = tmp_path / "videos"
    videos.mkdir()
    for pair_id in add_pairs(store, n):
        (videos / f"{pair_id}.mp4").write_bytes(mp4_bytes)
        store.mark_video(pair_id, VIDEO_READY, path=str(videos / f"{pair_id}.mp4"))
    app = create_app(store, videos, labellers=dict(TOKENS), overlap=OVERLAP)
    app.config["TESTING"] = True
    alice, bob = app.test_client(), app.test_client()
    assert alice.get(f"/?token={ALICE}").status_code == 200
    assert bob.get(f"/?token={BOB}").status_code == 200
    return store, alice, bob


def _attack(alice_pairs: list[int], bob: FlaskClient) -> tuple[dict[int, str], list[Any]]:
    """Bob's probe of each pair: what he concludes alice answered, and every reply he saw."""
    seen: list[Any] = []

    def agreed() -> float:
        status = bob.get("/api/status").get_json()
        seen.append(status)
        stats = status.get("labellers") or {}
        return (stats.get("agreement") or 0) * (stats.get("compared") or 0)

    guesses = {}
    for pair_id in alice_pairs:
        for answer in PROBES:
            before = agreed()
            reply = bob.post("/api/label", json={"pair_id": pair_id, "answer": answer})
            seen.append((reply.status_code, reply.get_json()))
            rose = agreed() > before + 0.5
            undo = bob.post("/api/undo")
            seen.append((undo.status_code, undo.get_json()))
            if rose:
                guesses[pair_id] = answer
                break
    return guesses, seen


@pytest.mark.parametrize("seed", [0, 1])
def test_no_answers_and_undos_tell_bob_what_alice_answered(
    tmp_path: Path, add_pairs, mp4_bytes: bytes, seed: int
) -> None:
    import random

    twice = [i for i in range(1, 25) if shows_twice(i, OVERLAP)][:9]
    transcripts = []
    recovered = 0
    rnd = random.Random(seed)
    worlds = [{p: rnd.choice(PROBES) for p in twice}]
    # The second world: alice gave a different answer to every pair.
    worlds.append(
        {p: PROBES[(PROBES.index(a) + rnd.randrange(1, 4)) % 4] for p, a in worlds[0].items()}
    )
    for world, truth in enumerate(worlds):
        folder = tmp_path / f"world{world}"
        folder.mkdir()
        store, alice, bob = _served(folder, add_pairs, mp4_bytes)
        for pair_id, answer in truth.items():
            reply = alice.post("/api/label", json={"pair_id": pair_id, "answer": answer})
            assert reply.status_code == 200
        guesses, seen = _attack(twice, bob)
        recovered += sum(guesses.get(p) == a for p, a in truth.items())
        transcripts.append(json.dumps(seen, sort_keys=True))
        assert len(store.labels()) == len(twice)  # bob's probes took nothing of alice's
        store.close()
    assert recovered == 0
    assert transcripts[0] == transcripts[1]  # bob cannot tell the two worlds apart


def test_a_pair_handed_to_one_labeller_cannot_be_answered_by_another(
    tmp_path: Path, add_pairs, mp4_bytes: bytes
) -> None:
    store, alice, bob = _served(tmp_path, add_pairs, mp4_bytes, n=3)
    held = alice.get("/api/next").get_json()["pair_id"]
    reply = bob.post("/api/label", json={"pair_id": held, "answer": "right"})
    assert reply.status_code == 409 and reply.get_json()["error"] == "leased"
    assert "right" not in reply.get_json()["message"]
    assert alice.post("/api/label", json={"pair_id": held, "answer": "left"}).status_code == 200
    assert [(lb.pair_id, lb.labeller) for lb in store.labels()] == [(held, "alice")]
    # bob is never handed a pair leased to alice, even when every ready pair is hers.
    mine = {held}
    while (pair := alice.get("/api/next?exclude=" + ",".join(map(str, mine))).get_json())["pair"]:
        mine.add(pair["pair_id"])
    nxt = bob.get("/api/next").get_json()
    assert nxt["pair"] is None and nxt["state"] == "busy"
    assert "another labeller" in nxt["reason"]
    store.close()
