"""A tiny corpus for the atlas tests: four short Python snippets the bundled model knows."""

TEXTS = (
    "def add(a, b):\n    return a + b\n\n\nprint(add(1, 2), add(3, 4))\n",
    "import os\nfor name in os.listdir('.'):\n    print(name)\n",
    "total = 0\nfor i in range(10):\n    total = total + i\nprint(total)\n",
    "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n",
)
REPEATED = (10, 2, 0)
