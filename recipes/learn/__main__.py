import sys

from recipes.learn.run import main

sys.exit(main())
