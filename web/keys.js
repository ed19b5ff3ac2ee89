// What a key press does on the labelling page: a command, or null (the key is not ours there).
// Arrows label unless a form control has focus (they move it); Space skips unless a button or
// a form control has focus (it presses or edits that); 0-9 grade a clip to rate.
import { gradeOfKey } from "./ratings.js";

const ANSWER_KEYS = { ArrowLeft: "left", ArrowRight: "right", ArrowDown: "equal" };

// -> {answer: "left" | "right" | "equal" | "skip"} | {answer: "grade", grade} | {undo: true}
//    | {togglePlay: true} | null
export function keyCommand(e, current) {
  const tag = e.target.tagName;
  const onControl = tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA";
  const onButton = tag === "BUTTON";
  const grade = onControl ? null : gradeOfKey(e.key, current);
  if (grade !== null) return { answer: "grade", grade };
  if (e.key in ANSWER_KEYS) return onControl ? null : { answer: ANSWER_KEYS[e.key] };
  switch (e.key) {
    case "=":
      return { answer: "equal" };
    case " ":
      return onButton || onControl ? null : { answer: "skip" };
    case "s":
    case "S":
      return { answer: "skip" };
    case "Backspace":
    case "u":
    case "U":
      return { undo: true };
    case "p":
    case "P":
      return { togglePlay: true };
    default:
      return null;
  }
}
