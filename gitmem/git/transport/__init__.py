"""Git's smart HTTP: what may be fetched and pushed, and the answer (:mod:`.smart_http`), the
``git http-backend`` process it runs (:mod:`.http_backend`), and the wants of a fetch checked against
the refs so that no unreachable object is served (:mod:`.upload_wants`)."""
