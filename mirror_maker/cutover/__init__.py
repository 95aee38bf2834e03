"""``cutover``: the planned move of a flow's readers to the target, once its producers stopped.

A flow is run until every partition is mirrored (``drain``), then ``verify`` proves the target
holds every record of the source, and each consumer group of the source is placed on the target
before the target record of the first source record it had not read (``groups``): from verify's
record-for-record pairing, so the place is exact whatever the offset syncs hold. ``flow`` runs
the steps and says, in one report, what holds and what does not.
"""
