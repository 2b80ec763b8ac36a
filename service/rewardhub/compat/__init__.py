"""Drop-in wire protocols of other trainers and services.

Each module translates a peer's payload into a :class:`~rewardhub.protocol.ScoreRequest`, calls the same
scoring service as ``/v1/score``, and translates the answer back. No scoring logic lives here.
"""
