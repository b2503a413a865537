# A WSGI app for TestSocketWorkerGunicorn: gunicorn serves it on the
# socket that systemd passes (LISTEN_FDS).
import os


def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [("hello from slot %s\n" % os.environ.get("FLEXIQ_SCALED_SLOT", "?")).encode()]
