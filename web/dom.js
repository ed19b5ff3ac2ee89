// DOM helpers shared by the page's modules. Text goes in through textContent only, never as
// HTML, so nothing a run or a person typed (a task, a message) can become markup.

export const $ = (id) => document.getElementById(id);

export function setText(id, text) {
  const el = $(id);
  if (el.textContent !== text) el.textContent = text;
}

export const fmt = new Intl.NumberFormat();

// "1 label", "2 labels", "1,024 videos": a count and its noun, agreeing (as core/status.py's plural).
export function count(n, one, many) {
  return fmt.format(n) + " " + (n === 1 ? one : many || one + "s");
}

export function readStorage(key) {
  try {
    return localStorage.getItem(key);
  } catch (err) {
    return null; // storage disabled: nothing was kept
  }
}

// "1 h 05 min", "12 min", "40 s": an estimate, so no more precision than a person can use.
export function duration(seconds) {
  if (!(seconds >= 0) || !Number.isFinite(seconds)) return "-";
  const s = Math.round(seconds);
  if (s < 60) return s + " s";
  const m = Math.round(s / 60);
  if (m < 60) return m + " min";
  return Math.floor(m / 60) + " h " + String(m % 60).padStart(2, "0") + " min";
}

// A time left as a range ("4–6 min", "about 40 s"); the same unit for both ends.
export function durationRange(low, high) {
  const lo = duration(low);
  const hi = duration(high);
  if (lo === "-" || hi === "-") return "-";
  if (lo === hi) return "about " + lo;
  const [loNum, loUnit] = splitUnit(lo);
  const [hiNum, hiUnit] = splitUnit(hi);
  return loUnit === hiUnit && loUnit ? loNum + "–" + hiNum + " " + hiUnit : lo + " – " + hi;
}

function splitUnit(text) {
  const m = /^(\d+) (s|min)$/.exec(text);
  return m ? [m[1], m[2]] : [text, ""];
}

// One line of feedback at the bottom of the page; the newest replaces the one before.
export function toast(text, kind = "ok", ms = 1800) {
  const box = $("toasts");
  box.replaceChildren();
  const el = document.createElement("div");
  el.className = "toast " + kind;
  el.textContent = text;
  box.append(el);
  setTimeout(() => {
    el.classList.add("fade");
    setTimeout(() => el.remove(), 350);
  }, ms);
}
