"""The web console at ``/console``: server-rendered pages over the platform's own HTTP
API (called in process with the signed-in key), a session cookie, CSRF on every form,
and static files shipped in the package (no CDN, no build step). ``mount.install_console``
puts it on the application; see docs/console.md."""
