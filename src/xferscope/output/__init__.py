"""What the headless commands print and write, shared by the commands (``xferscope.commands``) and their MPI
forms (``xferscope.cluster``): the files asked for (``files``), the live line on a terminal and the signals
that end a command (``terminal``), and the printing of a run, a comparison, a sweep and a saturation.

It stands below both: the commands and the MPI layer import it, it imports neither.
"""
