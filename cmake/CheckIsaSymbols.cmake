# Fails when an object compiled for one ISA family defines a weak (inline or
# template) symbol outside that family's namespace. The linker keeps one
# copy of each weak symbol for the whole library, so such a copy, compiled
# with AVX instructions, could be the one that baseline code calls.
# Arguments: NM, NAMESPACE (e.g. isa_avx2), OBJECTS ("|"-separated), STAMP.
string(REPLACE "|" ";" _objects "${OBJECTS}")
set(_bad "")
foreach(_obj IN LISTS _objects)
  execute_process(COMMAND "${NM}" -C --defined-only "${_obj}"
                  OUTPUT_VARIABLE _out RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${NM} failed on ${_obj}")
  endif()
  string(REPLACE "\n" ";" _lines "${_out}")
  foreach(_line IN LISTS _lines)
    if(_line MATCHES "^[0-9a-fA-F]* [WVu] (.*)$")
      set(_sym "${CMAKE_MATCH_1}")
      string(FIND "${_sym}" "${NAMESPACE}" _at)
      # DW.ref.* are data: pointers the exception tables share.
      if(_at EQUAL -1 AND NOT _sym MATCHES "^DW\\.ref\\.")
        string(APPEND _bad "\n  ${_sym}  (${_obj})")
      endif()
    endif()
  endforeach()
endforeach()
if(_bad)
  message(FATAL_ERROR "objects built for ${NAMESPACE} define shared weak symbols outside "
                      "their namespace (make them always-inline or move them into the "
                      "namespace):${_bad}")
endif()
file(WRITE "${STAMP}" "ok\n")
