# The Python interpreter Tarantella is built for, and what follows from it.
# Included from the top-level CMakeLists.txt before GNUInstallDirs, because a
# venv or conda interpreter also chooses the default install prefix.
#
#   TNT_PYTHON   the interpreter (default /usr/bin/python3, Debian's, which
#                has torch; the first python3 on PATH may be another one).
#                A venv or conda Python: -DTNT_PYTHON=$VIRTUAL_ENV/bin/python.
#
# It is the interpreter the Python extension is compiled for, the launcher's
# default --python-interpreter, and, when it is a venv or conda environment
# and no CMAKE_INSTALL_PREFIX is given, that environment is the install
# prefix: `cmake --install build` then puts libtnt in <env>/lib, the launcher
# in <env>/bin and the package in the environment's site-packages.
#
# Sets TNT_PYTHON_IS_ENV (venv or conda), TNT_PYTHON_ENV_PREFIX (its
# sys.prefix), TNT_PYTHON_SITE_REL (site-packages relative to a prefix, e.g.
# lib/python3.11/site-packages) and TNT_PYTHON_SYS_PATH (the interpreter's
# sys.path at configure time, ';'-separated).
if(EXISTS /usr/bin/python3)
  set(_tnt_python_default /usr/bin/python3)
else()
  find_program(_tnt_python_default NAMES python3 python)
endif()
set(TNT_PYTHON "${_tnt_python_default}" CACHE FILEPATH
  "Python interpreter to build the package for (a venv or conda python works)")
# Python3_EXECUTABLE, when given, is the same thing under CMake's usual name.
if(DEFINED Python3_EXECUTABLE AND NOT TNT_PYTHON STREQUAL Python3_EXECUTABLE
   AND TNT_PYTHON STREQUAL _tnt_python_default)
  set(TNT_PYTHON "${Python3_EXECUTABLE}" CACHE FILEPATH
    "Python interpreter to build the package for (a venv or conda python works)" FORCE)
endif()
if((NOT TNT_PYTHON OR NOT EXISTS "${TNT_PYTHON}") AND NOT TNT_WITH_PYTHON)
  # No package to build: the launcher still needs a default interpreter.
  if(NOT TNT_PYTHON)
    set(TNT_PYTHON /usr/bin/python3)
  endif()
  set(TNT_PYTHON_IS_ENV 0)
  set(TNT_PYTHON_SYS_PATH "")
  set(TNT_PYTHON_INSTALL_DIR "" CACHE STRING "Install directory of the tarantella package")
  return()
endif()
if(NOT TNT_PYTHON OR NOT EXISTS "${TNT_PYTHON}")
  message(FATAL_ERROR "TNT_PYTHON='${TNT_PYTHON}' does not exist: give the interpreter to build "
    "for, e.g. -DTNT_PYTHON=/usr/bin/python3 or -DTNT_PYTHON=$VIRTUAL_ENV/bin/python")
endif()
# Not resolved through symlinks: a venv's bin/python is a link to the base
# interpreter, and only the link makes Python pick the venv's sys.prefix.
set(Python3_EXECUTABLE "${TNT_PYTHON}" CACHE FILEPATH "Python interpreter (set from TNT_PYTHON)" FORCE)

execute_process(COMMAND "${TNT_PYTHON}" -c [=[
import os, sys, sysconfig
env = sys.prefix != getattr(sys, "base_prefix", sys.prefix) or \
    os.path.isdir(os.path.join(sys.prefix, "conda-meta"))
site = sysconfig.get_path("platlib", "posix_prefix", vars={"base": "/@P", "platbase": "/@P"})
print("1" if env else "0")
print(sys.prefix)
print(os.path.relpath(site, "/@P"))
print("%d.%d" % sys.version_info[:2])
print(";".join(p for p in sys.path if p))
]=]
  OUTPUT_VARIABLE _tnt_py_out RESULT_VARIABLE _tnt_py_rc ERROR_VARIABLE _tnt_py_err)
if(NOT _tnt_py_rc EQUAL 0)
  message(FATAL_ERROR "TNT_PYTHON='${TNT_PYTHON}' cannot be run: ${_tnt_py_err}")
endif()
string(REPLACE "\n" ";" _tnt_py_lines "${_tnt_py_out}")
list(GET _tnt_py_lines 0 TNT_PYTHON_IS_ENV)
list(GET _tnt_py_lines 1 TNT_PYTHON_ENV_PREFIX)
list(GET _tnt_py_lines 2 TNT_PYTHON_SITE_REL)
list(GET _tnt_py_lines 3 _tnt_py_version)
list(SUBLIST _tnt_py_lines 4 -1 TNT_PYTHON_SYS_PATH)
list(REMOVE_ITEM TNT_PYTHON_SYS_PATH "")

if(TNT_PYTHON_IS_ENV AND CMAKE_INSTALL_PREFIX_INITIALIZED_TO_DEFAULT)
  set(CMAKE_INSTALL_PREFIX "${TNT_PYTHON_ENV_PREFIX}" CACHE PATH "Install prefix" FORCE)
  message(STATUS "tarantella: ${TNT_PYTHON} is a venv/conda environment; "
    "installing into it (CMAKE_INSTALL_PREFIX=${CMAKE_INSTALL_PREFIX})")
endif()

# Where `cmake --install` puts the package, relative to the prefix. A venv or
# conda interpreter: its site-packages (the prefix is the environment by
# default). Debian's python3 searches <prefix>/lib/python3/dist-packages for
# the /usr prefix and <prefix>/lib/python3.X/dist-packages for /usr/local;
# other prefixes need PYTHONPATH (the install prints a hint; the launcher
# sets it for its ranks).
if(TNT_PYTHON_IS_ENV)
  set(_tnt_py_default ${TNT_PYTHON_SITE_REL})
elseif(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(_tnt_py_default lib/python3/dist-packages)
else()
  set(_tnt_py_default lib/python${_tnt_py_version}/dist-packages)
endif()
set(TNT_PYTHON_INSTALL_DIR ${_tnt_py_default} CACHE STRING
  "Install directory of the tarantella package, relative to CMAKE_INSTALL_PREFIX")
