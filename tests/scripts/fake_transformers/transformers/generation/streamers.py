"""Part of the transformers stand-in (see ../__init__.py)."""


class BaseStreamer:
    def put(self, value):
        raise NotImplementedError

    def end(self):
        raise NotImplementedError
