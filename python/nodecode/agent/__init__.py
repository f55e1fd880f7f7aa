"""The agent: the turn loop (``loop``) and what a process loads ahead of its
first ask (``warm``, which must not import the loop until it warms)."""
