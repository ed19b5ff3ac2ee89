// Grading one clip (a query of kind "rating"): the grade buttons, drawn from the run's scale,
// and the keys 0-9 that answer. Names go in through textContent only, never as HTML.
import { $ } from "./dom.js";

let drawnFor = ""; // the scale the buttons show now, as JSON

export function isRating(pair) {
  return !!pair && pair.kind === "rating";
}

const QUESTIONS = {
  pair: "Which one looks more like the behaviour you want?",
  rating: "How close is this clip to the behaviour you want? Give it a grade.",
};

// A clip to rate is its own page: one clip (no left/right captions or divider, by CSS on
// body.rating), the question for a grade, the scale's names on the buttons and the grade keys in
// the legend. Between two clips of a ratings run (`ratingsRun`) the page stays a ratings page.
export function renderGrades(pair, enabled, onGrade, ratingsRun) {
  const rating = pair ? isRating(pair) : !!ratingsRun;
  const box = $("grades");
  box.hidden = !rating;
  for (const id of ["btn-left", "btn-right", "btn-equal"]) $(id).hidden = rating;
  document.body.classList.toggle("rating", rating);
  $("question").textContent = QUESTIONS[rating ? "rating" : "pair"];
  $("video-a").setAttribute("aria-label", rating ? "The clip to grade" : "Left and right clips, side by side");
  if (!rating || !pair) return;
  const names = (pair.scale && pair.scale.names) || [];
  const key = JSON.stringify(names);
  if (key !== drawnFor) {
    drawnFor = key;
    renderGradeLegend(names);
    box.replaceChildren(
      ...names.map((name, grade) => {
        const b = document.createElement("button");
        b.type = "button";
        b.className = "choice grade";
        b.dataset.grade = String(grade);
        const kbd = document.createElement("kbd");
        kbd.setAttribute("aria-hidden", "true");
        kbd.textContent = String(grade);
        b.append(kbd, " " + name);
        b.addEventListener("click", () => onGrade(grade));
        return b;
      }),
    );
  }
  for (const b of box.querySelectorAll("button")) b.disabled = !enabled;
}

// "0 failed, 1 wobbly, 2 fine": the keys of this scale, for the legend.
function renderGradeLegend(names) {
  const item = $("legend-grades");
  const parts = [];
  names.forEach((name, grade) => {
    const kbd = document.createElement("kbd");
    kbd.textContent = String(grade);
    parts.push(kbd, " " + name + (grade < names.length - 1 ? ", " : ""));
  });
  item.replaceChildren(...parts);
}

// The grade a key gives the current clip (null: the key is not a grade on its scale).
export function gradeOfKey(key, pair) {
  if (!isRating(pair) || !/^[0-9]$/.test(key)) return null;
  const grade = Number(key);
  const levels = pair.scale ? pair.scale.levels : 0;
  return grade < levels ? grade : null;
}

export function gradeText(op) {
  if (op.grade === null) return "can't tell (skipped)";
  const names = (op.pair.scale && op.pair.scale.names) || [];
  return "grade " + op.grade + (names[op.grade] ? " (" + names[op.grade] + ")" : "");
}
