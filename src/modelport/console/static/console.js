// modelport console: small progressive enhancements; every page works without them.
"use strict";
document.addEventListener("click", (event) => {
  const button = event.target.closest("button.copy");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source || !navigator.clipboard) return;
  navigator.clipboard.writeText(source.textContent).then(() => {
    button.textContent = "Copied";
  });
});
document.addEventListener("submit", (event) => {
  const form = event.target.closest("form.confirm");
  if (form && !window.confirm(form.dataset.confirm)) event.preventDefault();
});
