// Grading one clip (a query of kind "rating"): the grade buttons, drawn from the run's scale,
// and the keys 0-9 that answer. Names go in through textContent only, never as HTML.
import { $ } from "./dom.js";

let drawnFor = ""; // the scale the buttons show now, as JSON

export function isRating(pair) {
  return !!pair && pair.kind === "rating";
}

// Show the grade buttons for a clip to rate (and the pair buttons otherwise).
export function renderGrades(pair, enabled, onGrade) {
  const rating = isRating(pair);
  const box = $("grades");
  box.hidden = !rating;
  for (const id of ["btn-left", "btn-right", "btn-equal"]) $(id).hidden = rating;
  document.body.classList.toggle("rating", rating);
  if (!rating) return;
  const names = (pair.scale && pair.scale.names) || [];
  const key = JSON.stringify(names);
  if (key !== drawnFor) {
    drawnFor = key;
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
