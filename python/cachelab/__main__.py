from cachelab.cli import main

main()
