// The agent in view and the labellers' figures. Pure DOM from two JSON bodies:
// GET /api/policy (the latest clip of the policy and the learning curve) and the `labellers`
// part of /api/status. Text goes in through textContent, the curve is SVG built with the DOM.

import { $, fmt, setText } from "./dom.js";

const POLL_POLICY_MS = 5000;
const SVG = "http://www.w3.org/2000/svg";
const W = 300;
const H = 110;
const PAD = 4;

// `api` is the page's own request function: it sends the page id, so the server counts this poll
// as the page's (an anonymous request would keep the end-of-run grace period open).
let status = null; // the latest /api/status body: the figures the agent view shows beside the curve
let lastBody = null;

// The page's figures are the status's (a finished run's, summary.json's): the curve's own last
// point is one rollout's mean, and would disagree with the header's.
export function noteStatus(s) {
  status = s;
  if (lastBody) renderFigures(lastBody);
}

let pollNow = () => {};

// At the run's end: the curve and the clip up to its last iteration, read while the server is
// still up (it stops a few seconds later, and the view reads them only every 5 s).
export function refreshAgentView() {
  pollNow();
}

export function startAgentView(api) {
  let shownClip = null;
  let timer = 0;
  let busy = false;
  async function poll() {
    if (busy) return; // the read in flight is as good
    busy = true;
    clearTimeout(timer);
    try {
      const res = await api("GET", "/api/policy");
      if (res.ok) shownClip = renderPolicy(res.data, shownClip);
    } catch (err) {
      // the status line already says when the server is unreachable
    }
    busy = false;
    timer = setTimeout(poll, POLL_POLICY_MS);
  }
  pollNow = poll;
  poll();
}

function renderPolicy(body, shownClip) {
  const clip = body.clip;
  const points = body.curve || [];
  $("agent").hidden = !clip && points.length === 0;
  if (clip && clip.clip_id !== shownClip) {
    const video = $("policy-video");
    video.src = clip.video_url;
    video.dataset.clipId = String(clip.clip_id);
    video.play().catch(() => {}); // muted: autoplay is allowed; a refusal only leaves it paused
  }
  lastBody = body;
  drawCurve(points);
  renderFigures(body);
  return clip ? clip.clip_id : shownClip;
}

// The clip's caption says which iteration it shows, and when the run is further on (its last
// clip is drawn every few iterations), how far.
function renderFigures(body) {
  const clip = body.clip;
  if (clip) {
    let caption = "Iteration " + fmt.format(clip.iteration) + ", step " + fmt.format(clip.env_step);
    const now = status && status.iteration;
    if (now != null && now > clip.iteration) {
      const ended = status.phase === "finished" ? "the run ended at iteration " : "the run is at iteration ";
      caption += " (the latest clip drawn; " + ended + fmt.format(now) + ")";
    }
    setText("policy-caption", caption);
  }
  const ret = status && status.latest_true_return;
  if (ret != null) setText("curve-true", ret.toFixed(1));
  setText("accuracy-text", accuracyText(status));
}

function series(points, key) {
  return points.filter((p) => p[key] != null && Number.isFinite(p[key])).map((p) => [p.env_step, p[key]]);
}

// Each line is scaled to its own range: the learned reward's scale is arbitrary, only its trend
// (and whether it follows the true return) means something.
function polyline(svg, pts, x0, x1, cls) {
  if (pts.length === 0) return 0;
  const ys = pts.map((p) => p[1]);
  const lo = Math.min(...ys);
  const hi = Math.max(...ys);
  const sx = (x) => PAD + ((x - x0) / Math.max(x1 - x0, 1)) * (W - 2 * PAD);
  const sy = (y) => H - PAD - (hi > lo ? (y - lo) / (hi - lo) : 0.5) * (H - 2 * PAD);
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("points", pts.map((p) => sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1)).join(" "));
  line.setAttribute("class", cls);
  svg.append(line);
  return pts.length;
}

function drawCurve(points) {
  const svg = $("curve");
  svg.replaceChildren();
  if (points.length === 0) return;
  const x0 = points[0].env_step;
  const x1 = points[points.length - 1].env_step;
  const drawn = {
    true: polyline(svg, series(points, "true_return"), x0, x1, "line-true"),
    predicted: polyline(svg, series(points, "predicted_return"), x0, x1, "line-predicted"),
  };
  svg.dataset.points = String(points.length);
  setText("curve-x", "env steps " + fmt.format(x0) + " \u2013 " + fmt.format(x1) + ", each line on its own scale");
  $("legend-true").hidden = drawn.true === 0;
  const last = (key) => series(points, key).pop();
  const ret = last("true_return");
  setText("curve-true", ret ? ret[1].toFixed(1) : "-");
  const pred = last("predicted_return");
  setText("curve-predicted", pred ? pred[1].toFixed(2) : "-");
}

// A ratings run's figure is how well the learned reward orders held-out clips as they were
// graded; a pairs run's, the share of held-out labels it sides with.
function accuracyText(s) {
  const grades = s && s.feedback_kind === "ratings";
  const what = grades ? "Grade agreement on held-out clips" : "Reward model accuracy on held-out labels";
  // At the end there is no "yet": a run this short held out too few answers to measure it.
  if (s && s.final && s.reward_accuracy == null) return what + ": not measured (this run held out too few answers).";
  if (!s || s.reward_accuracy == null) return what + ": not measured yet.";
  return what + ": " + Math.round(s.reward_accuracy * 100) + "%" + (s.final ? " (final)" : "") + ".";
}

export function renderLabellers(s) {
  const info = s.labellers;
  $("labellers").hidden = !info;
  $("signed-in").hidden = !info;
  if (!info) return;
  setText("you", "You label as " + (info.you || "-"));
  setText("signed-in", "Signed in as " + (info.you || "-"));
  const list = $("labeller-counts");
  list.replaceChildren(
    ...info.counts.map((c) => {
      const li = document.createElement("li");
      li.textContent = c.name + ": " + fmt.format(c.labels);
      if (c.name === info.you) li.className = "me";
      return li;
    }),
  );
}
