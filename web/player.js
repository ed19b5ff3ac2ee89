// The two <video> elements: the active one plays the current pair, the standby one preloads the
// next, and an answer swaps them, so the next pair plays without waiting for the network. Also
// the player controls (play/pause, speed, scrub bar, time).
import { $, readStorage, setText } from "./dom.js";

const RATE_KEY = "rlhf.rate"; // the labeller's speed, kept across pages

// Sets state.rate to the speed the labeller chose last (1 if none, or not one of the buttons').
export function createPlayer(state, prefetch) {
  const rates = Array.from(document.querySelectorAll(".speed"), (b) => Number(b.dataset.rate));
  const saved = Number(readStorage(RATE_KEY));
  state.rate = rates.includes(saved) ? saved : 1;
  let active = $("video-a");
  let standby = $("video-b");

  function load(el, pair) {
    el.dataset.pairId = String(pair.pair_id);
    el.defaultPlaybackRate = state.rate;
    el.src = pair.video_url;
  }

  function play(el) {
    el.playbackRate = state.rate;
    const p = el.play();
    if (p) p.catch(() => {}); // interrupted by the next swap: harmless
    renderPlayButton();
  }

  function swap() {
    const old = active;
    active = standby;
    standby = old;
    active.classList.replace("standby", "active");
    old.classList.replace("active", "standby");
    active.removeAttribute("aria-hidden");
    old.setAttribute("aria-hidden", "true");
    old.pause();
  }

  // Play `pair` now: swapped in when the standby video holds it, loaded otherwise.
  function show(pair) {
    if (standby.dataset.pairId === String(pair.pair_id)) swap();
    else load(active, pair);
    play(active);
  }

  function preload(next) {
    if (!prefetch || !next || standby.dataset.pairId === String(next.pair_id)) return;
    load(standby, next);
  }

  function togglePlay() {
    if (!state.current) return;
    if (active.paused) play(active);
    else active.pause();
    renderPlayButton();
  }

  function renderPlayButton() {
    const paused = active.paused;
    $("play-icon").textContent = paused ? "\u25b6" : "\u275a\u275a";
    $("play").setAttribute("aria-label", paused ? "Play" : "Pause");
  }

  function setRate(rate) {
    state.rate = rate;
    try {
      localStorage.setItem(RATE_KEY, String(rate));
    } catch (err) {
      /* private mode: the choice lasts for this page only */
    }
    for (const el of [active, standby]) {
      el.defaultPlaybackRate = rate;
      el.playbackRate = rate;
    }
    for (const b of document.querySelectorAll(".speed")) {
      b.setAttribute("aria-pressed", String(Number(b.dataset.rate) === rate));
    }
  }

  function tick() {
    const d = active.duration;
    if (state.current && Number.isFinite(d) && d > 0) {
      if (!state.scrubbing) $("scrub").value = String(Math.round((active.currentTime / d) * 1000));
      setText("time", active.currentTime.toFixed(1) + " / " + d.toFixed(1) + " s");
    }
    requestAnimationFrame(tick);
  }

  function onScrub() {
    const d = active.duration;
    if (Number.isFinite(d) && d > 0) active.currentTime = (Number($("scrub").value) / 1000) * d;
  }

  // `onError(pairId, isActive)`: a video could not be loaded.
  function bind(onError) {
    $("play").addEventListener("click", togglePlay);
    for (const b of document.querySelectorAll(".speed")) {
      b.addEventListener("click", () => setRate(Number(b.dataset.rate)));
    }
    const scrub = $("scrub");
    scrub.addEventListener("input", onScrub);
    scrub.addEventListener("pointerdown", () => (state.scrubbing = true));
    scrub.addEventListener("pointerup", () => {
      state.scrubbing = false;
      scrub.blur(); // arrows label again after a drag
    });
    for (const el of [active, standby]) {
      el.addEventListener("error", () => {
        if (el.getAttribute("src")) onError(Number(el.dataset.pairId), el === active);
      });
      el.addEventListener("play", renderPlayButton);
      el.addEventListener("pause", renderPlayButton);
    }
    setRate(state.rate);
    requestAnimationFrame(tick);
  }

  return {
    show,
    preload,
    togglePlay,
    bind,
    pause: () => active.pause(),
    stop: () => {
      active.pause();
      standby.pause();
    },
  };
}
