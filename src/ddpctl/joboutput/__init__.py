"""A job's output, the text its processes print, read back. It is untrusted input: split into lines in linear
time with a cap per line (:mod:`.lines`), read within fixed bounds (:mod:`.reading`), each record checked against
its schema and bounds before a value of it is used (:mod:`.record_check`), and shown with its control characters
made visible (:mod:`.visible`). The lines and what they say (:mod:`.lines`: the
rank prefix, the launcher's root-cause line), progress records and summaries (:mod:`.records`), the live line of
an attached ``up`` (:mod:`.live`), the output kept after a job ends (:mod:`.kept`) and its TensorBoard files
(:mod:`.tensorboard`). The executor writes through it and ``watch`` reads through it; neither imports the other.
Nothing here imports torch or docker at import time."""
