// What the page says about the trainer: the task, when the agent starts learning (labels needed vs
// given, the trainer's own numbers), a pacing pause, the ETA, the progress bar and the
// finished screen. Pure rendering from the /api/status body and the page's state.
//
// One figure, one source: the header and the progress box count a wait down from the same live
// count, and a finished run's figures are its summary.json's (the status says `final`).

import { $, count, duration, durationRange, fmt, setText } from "./dom.js";

const WAITING = "waiting for labels";
export const ENDED_TITLES = {
  finished: "Training has finished",
  interrupted: "Training was interrupted",
  crashed: "Training stopped with an error",
  "no trainer running": "No trainer is running",
};
// What the finished screen says under its title: never the title again.
const ENDED_MESSAGES = {
  finished: "There is nothing left to label. Thank you!",
  interrupted: "Your labels are saved: the run continues from them when it is resumed.",
  "no trainer running": "Your labels are kept for the next run or a resume.",
};

export function isRatingsRun(s) {
  return !!s && s.feedback_kind === "ratings";
}

export function renderTrainer(s, state) {
  state.phase = s.phase || (s.iteration == null ? "not started yet" : "running");
  setText("iteration", s.iteration == null ? "-" : fmt.format(s.iteration));
  setText("env-steps", stepsText(s));
  setText("latest-return", returnText(s));
  renderTarget(s.target);
  renderEta(s);
  setText("run-name", [s.run_name, s.env_id].filter(Boolean).join(" \u00b7 "));
  $("task-box").hidden = !s.task;
  setText("task", s.task || "");
  state.learning = learningText(s);
  renderProgressBar(state);
}

// PPO takes whole iterations, so a run ends a little past its budget: the real count then,
// never "40,960 / 40,000" (summary.json has the real count too).
function stepsText(s) {
  if (s.env_steps == null) return "-";
  const steps = fmt.format(s.env_steps);
  return s.total_timesteps && s.env_steps < s.total_timesteps
    ? steps + " / " + fmt.format(s.total_timesteps)
    : steps;
}

// A range from the pace of the answers (or the trainer's estimate once labels are all given);
// nothing until the server knows the pace.
function renderEta(s) {
  const eta = s.eta;
  const el = $("eta");
  if (!eta) {
    setText("eta", "-");
    el.title = "Shown once the pace of the answers is known (after about 10 answers)";
    return;
  }
  setText("eta", eta.from === "trainer" ? "about " + duration(eta.high_s) : durationRange(eta.low_s, eta.high_s));
  el.title =
    eta.from === "answers"
      ? "The labels still to give, at the pace of the answers so far"
      : "At the trainer's pace so far";
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
export function returnText(s) {
  const ret = s.latest_true_return;
  if (ret == null) return "-";
  const rate = s.latest_success_rate;
  return rate == null ? ret.toFixed(1) : ret.toFixed(1) + " (success " + Math.round(100 * rate) + "%)";
}

// The trainer's wait ("waiting for N more labels"), counted down with this page's live label
// count between two trainer updates: the header and the progress box from the same number.
function learningText(s) {
  if (s.phase !== WAITING || s.labels_target == null) {
    if (s.labels_used === 0 && s.phase === "training") {
      return "The agent starts learning with the first label that is not a skip.";
    }
    return "";
  }
  return { target: s.labels_target, starts: !s.labels_used };
}

export function renderProgressBar(state) {
  renderPhase(state);
  const done = state.labelsDone;
  if (done == null) return;
  const req = state.requested;
  const bar = $("progress");
  if (req) {
    const total = state.total && state.total > req ? " (" + fmt.format(state.total) + " over the run)" : "";
    setText("progress-text", fmt.format(done) + " of " + count(req, "label") + total);
    bar.max = req;
    bar.value = Math.min(done, req);
  } else {
    setText("progress-text", count(done, "label"));
    bar.max = 1;
    bar.value = 0;
  }
  setText("learning", learningLine(state.learning, done));
}

function missingLabels(learning, done) {
  return Math.max(0, learning.target - (done || 0));
}

// The header's word for the trainer: its phase, or while it waits, how many labels it waits for
// (the box's number); after the end, the end ("finished"), even once the server has gone.
function renderPhase(state) {
  let text = state.phase || "connecting...";
  if (state.ended) text = state.ended.phase || "ended";
  else if (state.serverGone) text = "server unreachable";
  else if (state.learning && typeof state.learning === "object") {
    const missing = missingLabels(state.learning, state.labelsDone);
    text = missing ? "waiting for " + count(missing, "more label") : "going on";
  }
  setText("phase", text);
}

function learningLine(learning, done) {
  if (!learning || typeof learning === "string") return learning || "";
  const missing = missingLabels(learning, done);
  const given = fmt.format(done) + " of " + fmt.format(learning.target) + " given";
  if (missing === 0) return "Enough labels: the agent goes on at its next check (" + given + ").";
  const more = count(missing, "more label");
  if (learning.starts) return "The agent starts learning after " + more + " (" + given + ").";
  return "The agent is paused until you catch up: " + more + " (" + given + ").";
}

export function renderFinishedScreen(state) {
  const s = state.ended;
  if (!s) return;
  const grades = isRatingsRun(s);
  setText("finished-title", ENDED_TITLES[s.phase] || "Labelling has ended");
  setText("finished-message", ENDED_MESSAGES[s.phase] || s.message || "");
  setText("final-return", returnText(s));
  setText("final-steps", s.env_steps == null ? "-" : fmt.format(s.env_steps));
  setText("final-labels-used-name", grades ? "Grades used" : "Labels used");
  setText("final-labels-done-name", grades ? "Grades given" : "Labels given");
  setText("final-labels-used", s.labels_used == null ? "-" : fmt.format(s.labels_used));
  setText("final-labels-done", state.labelsDone == null ? "-" : fmt.format(state.labelsDone));
  setText("final-accuracy-name", grades ? "Grade agreement" : "Pair accuracy");
  setText("final-accuracy", s.reward_accuracy == null ? "-" : Math.round(100 * s.reward_accuracy) + "%");
  $("final-accuracy").title = grades
    ? "Held-out clip pairs with different grades that the learned reward orders as you graded them"
    : "Held-out labels the learned reward sides with";
  setText("watch-command", s.watch_command || "tensorboard --logdir runs");
  $("resume-box").hidden = !s.resume_command;
  setText("resume-command", s.resume_command || "");
  renderSaving(state);
}

function renderSaving(state) {
  const n = state.outbox.filter((op) => op.kind === "label").length;
  const answers = count(n, "answer");
  let text = "Saving " + answers + "...";
  let kind = "";
  if (n === 0) {
    text = "All your answers are saved. Thank you!";
    kind = "done";
  } else if (state.serverGone) {
    text = answers + " could not be sent: this browser keeps them and sends them when the run serves again here.";
    kind = "lost";
  }
  setText("finished-saving", text);
  $("finished-saving").className = "saving " + kind;
  // A tab that outlives its server says what to do next.
  const resume = state.ended && state.ended.resume_command;
  setText(
    "server-gone",
    !state.serverGone
      ? ""
      : "The labelling server has stopped. " +
          (resume ? "To go on, run the command below; " : "When the run is served again, ") +
          "this page reconnects by itself at this address.",
  );
}
