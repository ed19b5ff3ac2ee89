// What the page says about the trainer: the task, when the agent starts learning (labels needed vs
// given, the trainer's own numbers), a pacing pause, the ETA, the progress bar and the
// finished screen. Pure rendering from the /api/status body and the page's state.

import { $, duration, fmt, setText } from "./dom.js";

const WAITING = "waiting for labels";

export function renderTrainer(s, state) {
  const phase = s.phase || (s.iteration == null ? "not started yet" : "running");
  // While the trainer waits, its message says for what (e.g. how many more labels).
  setText("phase", s.phase === WAITING && s.message ? s.message : phase);
  setText("iteration", s.iteration == null ? "-" : fmt.format(s.iteration));
  const steps = s.env_steps == null ? "-" : fmt.format(s.env_steps);
  setText("env-steps", s.total_timesteps ? steps + " / " + fmt.format(s.total_timesteps) : steps);
  setText("latest-return", returnText(s));
  renderTarget(s.target);
  setText("eta", s.eta_seconds == null ? "-" : duration(s.eta_seconds));
  setText("run-name", [s.run_name, s.env_id].filter(Boolean).join(" \u00b7 "));
  $("task-box").hidden = !s.task;
  setText("task", s.task || "");
  state.learning = learningText(s);
  renderProgressBar(state);
}

// With a target behaviour (--teacher.target, --teacher.reward) the run's return is the target's:
// say which, beside the figures and on the curve.
function renderTarget(target) {
  const name = target ? target + " return" : "return";
  setText("latest-return-label", "Latest " + name);
  setText("final-return-label", "Final " + name);
  setText("legend-true-name", target ? "target return (" + target + ")" : "true return");
}

// The true return of the last episodes; goal envs add the share that ended at the goal.
function returnText(s) {
  const ret = s.latest_true_return;
  if (ret == null) return "-";
  const rate = s.latest_success_rate;
  return rate == null ? ret.toFixed(1) : ret.toFixed(1) + " (success " + Math.round(100 * rate) + "%)";
}

// The trainer's wait in the same numbers as its terminal line ("waiting for N more labels"),
// counted down with this page's live label count between two trainer updates.
function learningText(s) {
  if (s.phase !== WAITING || s.labels_target == null) {
    if (s.labels_used === 0 && s.phase === "training") {
      return "The agent starts learning with the first label that is not a skip.";
    }
    return "";
  }
  const target = s.labels_target;
  return { target, starts: !s.labels_used };
}

export function renderProgressBar(state) {
  const done = state.labelsDone;
  if (done == null) return;
  const req = state.requested;
  const bar = $("progress");
  if (req) {
    const total = state.total && state.total > req ? " (" + fmt.format(state.total) + " over the run)" : "";
    setText("progress-text", fmt.format(done) + " of " + fmt.format(req) + " labels" + total);
    bar.max = req;
    bar.value = Math.min(done, req);
  } else {
    setText("progress-text", fmt.format(done) + (done === 1 ? " label" : " labels"));
    bar.max = 1;
    bar.value = 0;
  }
  setText("learning", learningLine(state.learning, done));
}

function learningLine(learning, done) {
  if (!learning || typeof learning === "string") return learning || "";
  const missing = Math.max(0, learning.target - done);
  const given = fmt.format(done) + " of " + fmt.format(learning.target) + " given";
  if (missing === 0) return "Enough labels: the agent goes on at its next check (" + given + ").";
  const more = fmt.format(missing) + (missing === 1 ? " more label" : " more labels");
  if (learning.starts) return "The agent starts learning after " + more + " (" + given + ").";
  return "The agent is paused until you catch up: " + more + " (" + given + ").";
}

export function renderFinishedScreen(state, titles) {
  const s = state.ended;
  if (!s) return;
  setText("finished-title", titles[s.phase] || "Labelling has ended");
  setText("finished-message", s.message || "");
  setText("final-return", returnText(s));
  setText("final-labels-used", s.labels_used == null ? "-" : fmt.format(s.labels_used));
  setText("final-labels-done", state.labelsDone == null ? "-" : fmt.format(state.labelsDone));
  setText("watch-command", s.watch_command || "tensorboard --logdir runs");
  $("resume-box").hidden = !s.resume_command;
  setText("resume-command", s.resume_command || "");
  renderSaving(state);
}

function renderSaving(state) {
  const n = state.outbox.filter((op) => op.kind === "label").length;
  const answers = n + (n === 1 ? " answer" : " answers");
  let text = "Saving " + answers + "...";
  let kind = "";
  if (n === 0) {
    text = "All your answers are saved. Thank you!";
    kind = "done";
  } else if (state.serverGone) {
    text = answers + " could not be sent: this browser keeps them and sends them when the server runs again at this address.";
    kind = "lost";
  }
  setText("finished-saving", text);
  $("finished-saving").className = "saving " + kind;
}
