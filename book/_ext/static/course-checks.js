// Self-checks (book/_ext/course_checks.py): the answer was computed by courselib when the page was
// built and sits in the page; this script only compares the reader's answer with it. No kernel, no network.
(function () {
  "use strict";
  function number(text) {
    const t = String(text).trim().replace(/,/g, "").replace(/\s+/g, "");
    return t === "" ? NaN : Number(t);
  }
  function check(box) {
    const kind = box.dataset.kind, feedback = box.querySelector(".course-check__feedback");
    let ok = false, given = false;
    if (kind === "choice") {
      const picked = box.querySelector("input[type=radio]:checked");
      given = !!picked;
      ok = given && picked.value === box.dataset.answer;
    } else {
      const value = number(box.querySelector("input[type=text]").value);
      given = !Number.isNaN(value);
      const answer = Number(box.dataset.answer), tol = Number(box.dataset.tolerance || 0);
      ok = given && Math.abs(value - answer) <= Math.max(tol, 1e-9 * Math.abs(answer));
    }
    box.classList.remove("course-check--right", "course-check--wrong");
    if (!given) {
      feedback.textContent = kind === "choice" ? "Pick one first." : "Type a number first.";
      return;
    }
    box.classList.add(ok ? "course-check--right" : "course-check--wrong");
    feedback.textContent = ok ? "Right." : "Not quite: try again, or open the answer below.";
  }
  function init() {
    document.querySelectorAll(".course-check").forEach((box) => {
      box.querySelector(".course-check__button").addEventListener("click", () => check(box));
      box.querySelectorAll("input").forEach((el) => el.addEventListener("keydown", (e) => {
        if (e.key === "Enter") { e.preventDefault(); check(box); }
      }));
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
